variable "name" {
  description = "Name of the replication IAM role (and prefix of its inline policy)."
  type        = string
}

variable "source_bucket_id" {
  description = "Name of the primary bucket, the one the publisher writes. It must have versioning enabled."
  type        = string
}

variable "source_bucket_arn" {
  description = "ARN of the primary bucket."
  type        = string
}

variable "source_kms_key_arn" {
  description = "KMS key that encrypts the primary bucket, or null when it uses SSE-S3. With a key, SSE-KMS objects are replicated and the role may decrypt with it."
  type        = string
  default     = null
}

variable "destinations" {
  description = "Replica buckets, keyed by region label (e.g. \"euw1\"). Each needs versioning enabled. storage_class: the replicas' storage class; replica_kms_key_arn: the key that encrypts the copies in that region (null: the destination's default encryption, which must then be SSE-S3)."
  type = map(object({
    bucket_arn          = string
    storage_class       = optional(string, "STANDARD")
    replica_kms_key_arn = optional(string)
  }))

  validation {
    condition     = length(var.destinations) > 0
    error_message = "destinations must name at least one replica bucket."
  }
}

variable "prefix" {
  description = "Run prefix, without leading or trailing '/'. Only the keys under replicated_subprefixes of it are replicated."
  type        = string
}

variable "replicated_subprefixes" {
  description = "Key prefixes, relative to <prefix>/, that are replicated. The default copies snapshot versions and the LATEST pointer; workers/ stays regional because each worker reports to its own region's bucket."
  type        = list(string)
  default     = ["v/", "LATEST"]

  validation {
    condition     = length(var.replicated_subprefixes) > 0
    error_message = "replicated_subprefixes must not be empty."
  }
}

variable "replicate_delete_markers" {
  description = "Replicate delete markers, so the garbage collector running against the primary also retires versions in the replicas (permanent version deletions are never replicated)."
  type        = bool
  default     = true
}

variable "replication_time_control" {
  description = "Turn on S3 Replication Time Control (99.99% of objects within 15 minutes, billed per GB) and the replication metrics it requires."
  type        = bool
  default     = false
}

variable "replication_metrics" {
  description = "Publish replication metrics (latency, pending bytes and operations) to CloudWatch even without RTC. Always on when replication_time_control is true."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags applied to the IAM role."
  type        = map(string)
  default     = {}
}
