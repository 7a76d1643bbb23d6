# Three service accounts for one run prefix, in every regional bucket:
#   publisher  creates <prefix>/v/*, <prefix>/LATEST and staged parts under <prefix>/.uploads/;
#              replaces LATEST (compare-and-swap) and removes its staged parts
#   worker     reads and lists the prefix; replaces status objects <prefix>/workers/*.json
#   gc         reads and lists the prefix; deletes <prefix>/v/* and stale <prefix>/.uploads/*
# Permissions come from three custom roles (reader, creator, deleter) bound on
# each bucket under IAM conditions on the object name; see policy/main.tf.
# Only the gc may delete a snapshot. The relay of copy mode runs as the publisher.

locals {
  role_id_prefix = replace(var.name_prefix, "-", "_")
  principals     = toset(["publisher", "worker", "gc"])

  extra_members = {
    publisher = var.publisher_members
    worker    = var.worker_members
    gc        = var.gc_members
  }

  members = {
    for p in local.principals : p => merge(
      { for m in local.extra_members[p] : m => m },
      { service_account = google_service_account.this[p].member },
    )
  }

  impersonators = merge([
    for p, list in {
      publisher = var.publisher_impersonators
      worker    = var.worker_impersonators
      gc        = var.gc_impersonators
    } : { for m in list : "${p}/${m}" => { principal = p, member = m } }
  ]...)
}

module "policy" {
  source = "./policy"

  bucket_names          = var.bucket_names
  prefix                = var.prefix
  list_scope            = var.list_scope
  members               = local.members
  worker_status_members = var.worker_status_members
}

resource "google_service_account" "this" {
  for_each = local.principals

  project      = var.project
  account_id   = "${var.name_prefix}-${each.key}"
  display_name = "wanrl-s3 ${each.key} (${var.name_prefix})"
  description  = "wanrl-s3 ${each.key} of the run prefix ${var.prefix}/ in ${length(var.bucket_names)} bucket(s)"
}

resource "google_project_iam_custom_role" "this" {
  for_each = module.policy.role_permissions

  project     = var.project
  role_id     = "${local.role_id_prefix}_wanrl_${each.key}"
  title       = "wanrl-s3 ${each.key} (${var.name_prefix})"
  description = "wanrl-s3 object ${each.key}; granted only on the run's buckets, under IAM conditions on the object name."
  permissions = each.value
}

# Conditional bindings need uniform bucket-level access, which
# modules/gcs-snapshot-bucket always turns on.
resource "google_storage_bucket_iam_member" "this" {
  for_each = module.policy.bindings

  bucket = each.value.bucket
  role   = google_project_iam_custom_role.this[each.value.role].name
  member = each.value.member

  condition {
    title       = each.value.title
    description = "wanrl-s3: ${each.value.principal} may use the ${each.value.role} role on these names of ${var.prefix}/ only"
    expression  = each.value.expression
  }
}

# Who may act as each service account (short-lived tokens through
# impersonation). Workloads that run as the account itself (a VM's or a GKE
# node pool's service account) need no entry here.
resource "google_service_account_iam_member" "impersonate" {
  for_each = local.impersonators

  service_account_id = google_service_account.this[each.value.principal].name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = each.value.member
}
