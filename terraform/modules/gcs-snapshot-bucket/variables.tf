variable "bucket_name" {
  description = "Name of the bucket (globally unique, 3-63 characters): one bucket per location and run."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$", var.bucket_name)) && !startswith(var.bucket_name, "goog")
    error_message = "bucket_name must be 3-63 characters of lower-case letters, digits, '.', '_' and '-', start and end with a letter or digit, and not start with \"goog\"."
  }
}

variable "project" {
  description = "Project that owns the bucket; null takes the provider's project."
  type        = string
  default     = null
}

variable "location" {
  description = "Bucket location: a region (e.g. \"us-central1\", \"europe-west4\"), a dual-region or a multi-region. Put each regional bucket next to its workers."
  type        = string
}

variable "prefix" {
  description = "Run prefix inside the bucket, without leading or trailing '/', e.g. \"runs/exp-42\". The lifecycle rules act on <prefix>/v/ and <prefix>/.uploads/; LATEST and workers/ sit beside them. Quotes and '*' are refused: the prefix is written into IAM condition expressions."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.()-]+(/[A-Za-z0-9!_.()-]+)*$", var.prefix))
    error_message = "prefix must be non-empty, must not start or end with '/', must not contain '//' and may use only letters, digits and !_.()- between the slashes."
  }
}

variable "storage_class" {
  description = "Default storage class. STANDARD suits snapshots that are read within minutes of being written; colder classes charge per read and for early deletion, which the garbage collector's deletes would incur."
  type        = string
  default     = "STANDARD"

  validation {
    condition     = contains(["STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE"], var.storage_class)
    error_message = "storage_class must be STANDARD, NEARLINE, COLDLINE or ARCHIVE."
  }
}

variable "kms_key_name" {
  description = "Cloud KMS key (projects/.../cryptoKeys/...) for default encryption (CMEK). null keeps Google-managed encryption. The project's Cloud Storage service agent needs roles/cloudkms.cryptoKeyEncrypterDecrypter on the key."
  type        = string
  default     = null
}

variable "versioning_enabled" {
  description = "Turn on object versioning. Off by default: the protocol never overwrites a snapshot, and with versioning on a delete only makes the object noncurrent (removed after noncurrent_version_expiration_days)."
  type        = bool
  default     = false
}

variable "soft_delete_retention_days" {
  description = "Days a deleted object stays restorable (and billed) under GCS soft delete: 0 turns soft delete off, otherwise 7 to 90. Soft delete does not block the garbage collector's deletes; it only delays when the bytes stop being billed."
  type        = number
  default     = 7

  validation {
    condition     = var.soft_delete_retention_days == 0 || (var.soft_delete_retention_days >= 7 && var.soft_delete_retention_days <= 90)
    error_message = "soft_delete_retention_days must be 0 or between 7 and 90."
  }
}

variable "version_expiration_days" {
  description = "Days after which objects under <prefix>/v/ are deleted by a lifecycle rule (a backstop behind the garbage collector, which keeps delta chains whole). Keep it above the longest gap between keyframes plus the longest training pause. null (the default) turns the rule off."
  type        = number
  default     = null

  validation {
    condition     = var.version_expiration_days == null || try(var.version_expiration_days >= 1, false)
    error_message = "version_expiration_days must be null or at least 1."
  }
}

variable "stale_upload_days" {
  description = "Days after which staged parts and upload markers under <prefix>/.uploads/ (left by a publisher that crashed mid-upload) are deleted."
  type        = number
  default     = 1

  validation {
    condition     = var.stale_upload_days >= 1
    error_message = "stale_upload_days must be at least 1 (a lifecycle age is counted in days)."
  }
}

variable "noncurrent_version_expiration_days" {
  description = "With versioning on: days after which noncurrent generations (old LATEST pointers, overwritten status objects, deleted snapshots) are removed for good."
  type        = number
  default     = 1

  validation {
    condition     = var.noncurrent_version_expiration_days >= 1
    error_message = "noncurrent_version_expiration_days must be at least 1."
  }
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete a bucket that still holds objects. Leave false for real runs."
  type        = bool
  default     = false
}

variable "labels" {
  description = "Labels applied to the bucket."
  type        = map(string)
  default     = {}
}
