# Three user-assigned managed identities for one run prefix, in every regional
# container:
#   publisher  writes <prefix>/v/*, <prefix>/LATEST (If-None-Match / If-Match) and
#              upload markers under <prefix>/.uploads/, which it also deletes
#   worker     reads and lists the prefix; writes status blobs <prefix>/workers/*.json
#   gc         reads and lists the prefix; deletes <prefix>/v/* and stale <prefix>/.uploads/*
# Permissions come from three custom roles (reader, writer, deleter) with
# exactly the blob data actions needed, assigned at container scope under
# conditions on the blob path; see policy/main.tf. Only the gc may delete a
# snapshot. The relay of copy mode runs as the publisher.

locals {
  principals = toset(["publisher", "worker", "gc"])

  extra_principals = {
    publisher = var.publisher_principal_ids
    worker    = var.worker_principal_ids
    gc        = var.gc_principal_ids
  }

  principal_ids = {
    for p in local.principals : p => merge(
      { for id in local.extra_principals[p] : id => id },
      { identity = azurerm_user_assigned_identity.this[p].principal_id },
    )
  }
}

module "policy" {
  source = "./policy"

  container_scopes         = var.container_scopes
  prefix                   = var.prefix
  list_scope               = var.list_scope
  principals               = local.principal_ids
  worker_status_principals = var.worker_status_principal_ids
}

resource "azurerm_user_assigned_identity" "this" {
  for_each = local.principals

  name                = "${var.name_prefix}-${each.key}"
  resource_group_name = var.resource_group_name
  location            = var.location
  tags                = var.tags
}

resource "azurerm_role_definition" "this" {
  for_each = module.policy.role_data_actions

  name        = "${var.name_prefix} wanrl-s3 blob ${each.key}"
  scope       = var.role_definition_scope
  description = "wanrl-s3 blob ${each.key}: exactly these data actions; assigned only on the run's containers, under conditions on the blob path."

  permissions {
    actions      = []
    data_actions = each.value
  }

  assignable_scopes = [var.role_definition_scope]
}

resource "azurerm_role_assignment" "this" {
  for_each = module.policy.assignments

  scope              = each.value.scope
  role_definition_id = azurerm_role_definition.this[each.value.role].role_definition_resource_id
  principal_id       = each.value.principal_id
  # The identities made here are service principals; saying so spares Azure
  # the directory lookup that fails while a new identity is replicating.
  principal_type    = endswith(each.key, "/identity") ? "ServicePrincipal" : null
  condition         = each.value.condition
  condition_version = "2.0"
  description       = "wanrl-s3 ${each.value.principal}: ${each.value.role} on ${var.prefix}/ only"
}
