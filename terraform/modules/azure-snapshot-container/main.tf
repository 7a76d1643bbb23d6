# One regional snapshot container on Azure Blob Storage, in a storage account
# of its own: private, HTTPS and TLS 1.2 only, no shared keys (every request
# carries an Entra ID token), no anonymous access, no local users, network
# access denied unless listed, with lifecycle rules that clean up after the
# protocol's failure modes. Who may do what is modules/azure-iam's job.
#
# Nothing here can stop the garbage collector's deletes: no immutability
# policy, no legal hold, no version-level WORM. Blob soft delete keeps a
# deleted blob restorable (and billed) for blob_soft_delete_retention_days;
# versioning, when on, turns a delete into a previous version that a
# lifecycle rule removes.
#
# Everything is managed through Azure Resource Manager (the container through
# storage_account_id), so terraform itself needs no shared key either; set
# storage_use_azuread = true in the azurerm provider block all the same.

locals {
  run_path        = "${var.container_name}/${var.prefix}"
  expire_versions = var.version_expiration_days != null
}

resource "azurerm_storage_account" "this" {
  #checkov:skip=CKV_AZURE_33:Queue service logging needs the queue data plane and a shared key or extra provider settings, and wanrl-s3 uses no queues; blob access is audited through diagnostic settings (log_analytics_workspace_id).
  #checkov:skip=CKV_AZURE_59:Workers on other clouds reach the account over the internet; network_rules deny by default (allowed_ip_ranges, allowed_subnet_ids) and every request needs an Entra ID token because shared keys are off.
  #checkov:skip=CKV2_AZURE_1:Microsoft-managed keys with infrastructure encryption; a customer-managed key needs a Key Vault, a key and an identity with access that this module does not own.
  #checkov:skip=CKV_AZURE_206:Snapshots are derived data the trainer can republish and a multi-region run already keeps one account per region; ZRS (the default) survives a zone, and replication_type takes GZRS where a geo copy is wanted.
  #checkov:skip=CKV2_AZURE_33:Private endpoints need a virtual network in every worker's network, which workers on other clouds and marketplaces do not have; network_rules and Entra ID restrict access instead.
  name                              = var.account_name
  resource_group_name               = var.resource_group_name
  location                          = var.location
  account_kind                      = "StorageV2"
  account_tier                      = "Standard"
  account_replication_type          = var.replication_type
  access_tier                       = "Hot"
  https_traffic_only_enabled        = true
  min_tls_version                   = "TLS1_2"
  allow_nested_items_to_be_public   = false
  shared_access_key_enabled         = false
  default_to_oauth_authentication   = true
  local_user_enabled                = false
  sftp_enabled                      = false
  is_hns_enabled                    = false
  infrastructure_encryption_enabled = true
  cross_tenant_replication_enabled  = false
  public_network_access_enabled     = var.public_network_access_enabled
  tags                              = var.tags

  # Only relevant if someone turns shared keys back on outside Terraform.
  sas_policy {
    expiration_period = "00.01:00:00"
    expiration_action = "Log"
  }

  blob_properties {
    versioning_enabled = var.versioning_enabled

    delete_retention_policy {
      days = var.blob_soft_delete_retention_days
    }

    container_delete_retention_policy {
      days = var.container_soft_delete_retention_days
    }
  }

  network_rules {
    default_action             = var.network_default_action
    bypass                     = ["AzureServices"]
    ip_rules                   = var.allowed_ip_ranges
    virtual_network_subnet_ids = var.allowed_subnet_ids
  }
}

resource "azurerm_storage_container" "this" {
  #checkov:skip=CKV2_AZURE_21:The check wants azurerm_log_analytics_storage_insights, which reads the account through a shared key that this account refuses; blob read logs go to Log Analytics through the diagnostic setting below (log_analytics_workspace_id).
  name                  = var.container_name
  storage_account_id    = azurerm_storage_account.this.id
  container_access_type = "private"
}

resource "azurerm_storage_management_policy" "this" {
  storage_account_id = azurerm_storage_account.this.id

  # Backstop for abandoned runs; the garbage collector is what normally deletes
  # old versions, keeping every retained delta chain whole. Off by default.
  dynamic "rule" {
    for_each = local.expire_versions ? [var.version_expiration_days] : []
    content {
      name    = "expire-snapshot-versions"
      enabled = true
      filters {
        blob_types   = ["blockBlob"]
        prefix_match = ["${local.run_path}/v/"]
      }
      actions {
        base_blob {
          delete_after_days_since_modification_greater_than = rule.value
        }
      }
    }
  }

  # Upload markers a crashed publisher left behind (the az:// store stages
  # blocks on the target blob and lists uploads by markers under
  # <prefix>/.uploads/; Azure drops uncommitted blocks after seven days).
  rule {
    name    = "stale-upload-markers"
    enabled = true
    filters {
      blob_types   = ["blockBlob"]
      prefix_match = ["${local.run_path}/.uploads/"]
    }
    actions {
      base_blob {
        delete_after_days_since_modification_greater_than = var.stale_upload_days
      }
    }
  }

  # With versioning on, every LATEST move and status write leaves a previous
  # version, and every delete turns the current one into a previous version.
  dynamic "rule" {
    for_each = var.versioning_enabled ? [var.noncurrent_version_expiration_days] : []
    content {
      name    = "expire-previous-versions"
      enabled = true
      filters {
        blob_types   = ["blockBlob"]
        prefix_match = ["${local.run_path}/"]
      }
      actions {
        version {
          delete_after_days_since_creation = rule.value
        }
      }
    }
  }
}

# Blob read, write and delete logs, for audits of who touched the run.
resource "azurerm_monitor_diagnostic_setting" "blob" {
  count = var.log_analytics_workspace_id == null ? 0 : 1

  name                       = "${var.account_name}-blob-audit"
  target_resource_id         = "${azurerm_storage_account.this.id}/blobServices/default"
  log_analytics_workspace_id = var.log_analytics_workspace_id

  enabled_log {
    category = "StorageRead"
  }

  enabled_log {
    category = "StorageWrite"
  }

  enabled_log {
    category = "StorageDelete"
  }
}
