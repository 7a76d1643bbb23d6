variable "account_name" {
  description = "Name of the storage account (globally unique, 3-24 lower-case letters and digits): one account per region and run."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]{3,24}$", var.account_name))
    error_message = "account_name must be 3-24 lower-case letters and digits."
  }
}

variable "container_name" {
  description = "Name of the container that holds the run (3-63 lower-case letters, digits and single '-')."
  type        = string
  default     = "wanrl"

  validation {
    condition     = can(regex("^[a-z0-9](?:[a-z0-9]|-[a-z0-9]){2,62}$", var.container_name))
    error_message = "container_name must be 3-63 lower-case letters, digits and single hyphens, starting and ending with a letter or digit."
  }
}

variable "resource_group_name" {
  description = "Resource group the storage account is created in."
  type        = string
}

variable "location" {
  description = "Azure region of the storage account (e.g. \"westeurope\"). Put each regional account next to its workers."
  type        = string
}

variable "prefix" {
  description = "Run prefix inside the container, without leading or trailing '/', e.g. \"runs/exp-42\". The lifecycle rules act on <prefix>/v/ and <prefix>/.uploads/; LATEST and workers/ sit beside them. Quotes and '*' are refused: the prefix is written into role assignment conditions."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.()-]+(/[A-Za-z0-9!_.()-]+)*$", var.prefix))
    error_message = "prefix must be non-empty, must not start or end with '/', must not contain '//' and may use only letters, digits and !_.()- between the slashes."
  }
}

variable "replication_type" {
  description = "Redundancy of the account: LRS, ZRS, GRS, RAGRS, GZRS or RAGZRS. ZRS survives a zone; geo-redundancy is an extra copy the trainer could republish anyway."
  type        = string
  default     = "ZRS"

  validation {
    condition     = contains(["LRS", "ZRS", "GRS", "RAGRS", "GZRS", "RAGZRS"], var.replication_type)
    error_message = "replication_type must be LRS, ZRS, GRS, RAGRS, GZRS or RAGZRS."
  }
}

variable "versioning_enabled" {
  description = "Turn on blob versioning. Off by default: the protocol never overwrites a snapshot, and with versioning on a delete only turns the blob into a previous version (removed after noncurrent_version_expiration_days)."
  type        = bool
  default     = false
}

variable "blob_soft_delete_retention_days" {
  description = "Days a deleted blob stays restorable (and billed), 1-365. Soft delete does not block the garbage collector's deletes; it only delays when the bytes stop being billed."
  type        = number
  default     = 7

  validation {
    condition     = var.blob_soft_delete_retention_days >= 1 && var.blob_soft_delete_retention_days <= 365
    error_message = "blob_soft_delete_retention_days must be between 1 and 365."
  }
}

variable "container_soft_delete_retention_days" {
  description = "Days a deleted container stays restorable, 1-365."
  type        = number
  default     = 7

  validation {
    condition     = var.container_soft_delete_retention_days >= 1 && var.container_soft_delete_retention_days <= 365
    error_message = "container_soft_delete_retention_days must be between 1 and 365."
  }
}

variable "version_expiration_days" {
  description = "Days after which blobs under <prefix>/v/ are deleted by a lifecycle rule (a backstop behind the garbage collector, which keeps delta chains whole). Keep it above the longest gap between keyframes plus the longest training pause. null (the default) turns the rule off."
  type        = number
  default     = null

  validation {
    condition     = var.version_expiration_days == null || try(var.version_expiration_days >= 1, false)
    error_message = "version_expiration_days must be null or at least 1."
  }
}

variable "stale_upload_days" {
  description = "Days after which upload markers under <prefix>/.uploads/ (left by a publisher that crashed mid-upload) are deleted."
  type        = number
  default     = 1

  validation {
    condition     = var.stale_upload_days >= 1
    error_message = "stale_upload_days must be at least 1 (a lifecycle age is counted in days)."
  }
}

variable "noncurrent_version_expiration_days" {
  description = "With versioning on: days after which previous versions (old LATEST pointers, overwritten status objects, deleted snapshots) are removed."
  type        = number
  default     = 1

  validation {
    condition     = var.noncurrent_version_expiration_days >= 1
    error_message = "noncurrent_version_expiration_days must be at least 1."
  }
}

variable "public_network_access_enabled" {
  description = "Whether the account has a public endpoint at all. true (the default) lets workers on other clouds connect from the addresses in allowed_ip_ranges; false leaves only private endpoints."
  type        = bool
  default     = true
}

variable "network_default_action" {
  description = "What the account's firewall does with requests from addresses and subnets not listed: \"Deny\" (the default) or \"Allow\" (any address; every request still needs an Entra ID token with a role on the container)."
  type        = string
  default     = "Deny"

  validation {
    condition     = contains(["Deny", "Allow"], var.network_default_action)
    error_message = "network_default_action must be \"Deny\" or \"Allow\"."
  }
}

variable "allowed_ip_ranges" {
  description = "Public IPv4 addresses or CIDR ranges (no /31 or /32: write a single address plainly) allowed through the firewall: the trainer's and the workers' egress addresses."
  type        = list(string)
  default     = []
}

variable "allowed_subnet_ids" {
  description = "Azure virtual network subnet ids allowed through the firewall (the subnets need the Microsoft.Storage service endpoint)."
  type        = list(string)
  default     = []
}

variable "log_analytics_workspace_id" {
  description = "Log Analytics workspace that receives the blob service's StorageRead, StorageWrite and StorageDelete logs; null sends none."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags applied to the storage account."
  type        = map(string)
  default     = {}
}
