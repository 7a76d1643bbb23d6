variable "bucket_name" {
  description = "Name of the bucket (globally unique, 3-63 characters): one bucket per region and run."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be 3-63 characters of lower-case letters, digits, '.' and '-', starting and ending with a letter or digit."
  }
}

variable "prefix" {
  description = "Run prefix inside the bucket, without leading or trailing '/', e.g. \"runs/exp-42\". The lifecycle rules act on <prefix>/v/ (snapshot versions); LATEST and workers/ sit beside it."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.*'()-]+(/[A-Za-z0-9!_.*'()-]+)*$", var.prefix))
    error_message = "prefix must be non-empty, must not start or end with '/', must not contain '//' and may use only S3's safe key characters."
  }
}

variable "kms_key_arn" {
  description = "ARN of a customer-managed KMS key for default encryption (SSE-KMS, with an S3 bucket key). null keeps SSE-S3 (AES256), which needs no key policy and costs nothing per request."
  type        = string
  default     = null
}

variable "versioning_enabled" {
  description = "Turn on S3 object versioning. Required on the source and every destination of bucket replication; off is fine for fanout and copy modes, where the protocol itself never overwrites a version."
  type        = bool
  default     = false
}

variable "version_expiration_days" {
  description = "Days after which objects under <prefix>/v/ expire (a backstop behind the garbage collector, which keeps delta chains whole). Keep it above the longest gap between keyframes plus the longest training pause: a version older than this is deleted even when LATEST still points at it. null (the default) turns the rule off: wanrl-s3 gc is the collector that knows about delta chains."
  type        = number
  default     = null

  validation {
    condition     = var.version_expiration_days == null || try(var.version_expiration_days >= 1, false)
    error_message = "version_expiration_days must be null or at least 1."
  }
}

variable "abort_incomplete_multipart_days" {
  description = "Days after which incomplete multipart uploads (left by a publisher that crashed mid-upload) are aborted and their parts freed, anywhere in the bucket."
  type        = number
  default     = 1

  validation {
    condition     = var.abort_incomplete_multipart_days >= 1
    error_message = "abort_incomplete_multipart_days must be at least 1 (S3's smallest unit is a day)."
  }
}

variable "noncurrent_version_expiration_days" {
  description = "With versioning on: days after which noncurrent object versions (old LATEST pointers, overwritten worker status objects, objects deleted by the garbage collector) are removed for good. Has no effect on an unversioned bucket."
  type        = number
  default     = 1

  validation {
    condition     = var.noncurrent_version_expiration_days >= 1
    error_message = "noncurrent_version_expiration_days must be at least 1."
  }
}

variable "delete_principal_arns" {
  description = "IAM role or user ARNs that may delete objects. When non-empty the bucket policy denies s3:DeleteObject and s3:DeleteObjectVersion to every other principal of any account (pass the garbage collector's role, plus an admin role if humans must clean up). Empty: no such guard, IAM policies alone decide."
  type        = list(string)
  default     = []
}

variable "source_policy_documents" {
  description = "Policy documents (JSON) merged into the bucket policy, such as modules/cloudfront-cdn's bucket_policy_json, which lets only that distribution read the run's versions and LATEST. A bucket has one policy, so statements from elsewhere come in here."
  type        = list(string)
  default     = []
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete a bucket that still holds objects. Leave false for real runs."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags applied to the bucket."
  type        = map(string)
  default     = {}
}
