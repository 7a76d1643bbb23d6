variable "name_prefix" {
  description = "Prefix of the role names: <name_prefix>-publisher, <name_prefix>-worker, <name_prefix>-gc."
  type        = string
}

variable "bucket_arns" {
  description = "ARNs of every regional snapshot bucket of the run (primary and replicas). Each role gets the same rights in each of them."
  type        = list(string)

  validation {
    condition     = length(var.bucket_arns) > 0
    error_message = "bucket_arns must name at least one bucket."
  }
}

variable "prefix" {
  description = "Run prefix inside the buckets, without leading or trailing '/'. No role can touch keys outside it."
  type        = string
}

variable "kms_key_arns" {
  description = "KMS keys that encrypt the buckets (SSE-KMS). Empty for SSE-S3. Readers get kms:Decrypt, writers also kms:GenerateDataKey."
  type        = list(string)
  default     = []
}

variable "publisher_trusted_principal_arns" {
  description = "IAM principals (role, user or account-root ARNs) allowed to assume the publisher role. Empty: this account's root, i.e. any principal of the account whose own policy allows sts:AssumeRole on it."
  type        = list(string)
  default     = []
}

variable "worker_trusted_principal_arns" {
  description = "IAM principals allowed to assume the worker role (with a worker_id session tag). Empty: this account's root."
  type        = list(string)
  default     = []
}

variable "gc_trusted_principal_arns" {
  description = "IAM principals allowed to assume the garbage-collector role. Empty: this account's root."
  type        = list(string)
  default     = []
}

variable "worker_id_tag_key" {
  description = "Session tag that carries a worker's id. The worker role may write only <prefix>/workers/<value of this tag>.json, and cannot be assumed without the tag."
  type        = string
  default     = "worker_id"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.:/=+@-]{1,128}$", var.worker_id_tag_key))
    error_message = "worker_id_tag_key must be a valid IAM tag key."
  }
}

variable "list_bucket_scope" {
  description = "\"prefix\": s3:ListBucket only with an s3:prefix under the run prefix (least privilege; S3 then answers 403, not 404, for a missing key, so readers must not take 403 on an absent manifest or LATEST as fatal). \"bucket\" (the default): unrestricted s3:ListBucket on the run's buckets, so a missing key is a plain 404, which replica readers need to tell \"not replicated yet\" from \"forbidden\"."
  type        = string
  default     = "bucket"

  validation {
    condition     = contains(["prefix", "bucket"], var.list_bucket_scope)
    error_message = "list_bucket_scope must be \"prefix\" or \"bucket\"."
  }
}

variable "max_session_duration_s" {
  description = "Longest session, in seconds, of each role (3600 to 43200). Workers refresh credentials through their SDK's credential provider."
  type        = number
  default     = 3600

  validation {
    condition     = var.max_session_duration_s >= 3600 && var.max_session_duration_s <= 43200
    error_message = "max_session_duration_s must be between 3600 and 43200."
  }
}

variable "permissions_boundary_arn" {
  description = "Permissions boundary attached to every role, or null."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags applied to the roles."
  type        = map(string)
  default     = {}
}
