variable "name_prefix" {
  description = "Prefix of every name: buckets are <name_prefix>-<region label>-<account id>, roles <name_prefix>-publisher and so on."
  type        = string
  default     = "wanrl"

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,30}$", var.name_prefix))
    error_message = "name_prefix must be 1-31 lower-case letters, digits or '-', starting with a letter or digit."
  }
}

variable "run_prefix" {
  description = "Run prefix inside every bucket, without leading or trailing '/'. The CLI's URLs end with it."
  type        = string
  default     = "runs/demo"
}

variable "mode" {
  description = "How versions reach the replicas: \"replicate\" (the publisher writes the primary, S3 replication copies the rest; versioning and replication are created), \"fanout\" (the publisher writes every region itself) or \"copy\" (`wanrl-s3 relay` copies server-side)."
  type        = string
  default     = "replicate"

  validation {
    condition     = contains(["fanout", "replicate", "copy"], var.mode)
    error_message = "mode must be one of fanout, replicate, copy."
  }
}

variable "regions" {
  description = "The three regions: label (a short TOML bare key used by the CLI, e.g. \"use1\") and s3_region (the AWS region) of the primary and of the two replicas."
  type = object({
    primary   = object({ label = string, s3_region = string })
    replica_a = object({ label = string, s3_region = string })
    replica_b = object({ label = string, s3_region = string })
  })
  default = {
    primary   = { label = "use1", s3_region = "us-east-1" }
    replica_a = { label = "euw1", s3_region = "eu-west-1" }
    replica_b = { label = "apne1", s3_region = "ap-northeast-1" }
  }

  validation {
    condition = alltrue([
      for r in values(var.regions) : can(regex("^[a-z0-9][a-z0-9-]{0,15}$", r.label))
    ]) && length(distinct([for r in values(var.regions) : r.label])) == 3
    error_message = "region labels must be distinct, 1-16 lower-case letters, digits or '-'."
  }

  validation {
    condition     = length(distinct([for r in values(var.regions) : r.s3_region])) == 3
    error_message = "the three regions must be distinct AWS regions."
  }
}

variable "version_expiration_days" {
  description = "Backstop expiry of <run_prefix>/v/ objects, in days (see modules/snapshot-bucket). null turns it off."
  type        = number
  default     = null
}

variable "replication_time_control" {
  description = "In replicate mode: turn on S3 Replication Time Control (15-minute SLA, extra cost) and replication metrics."
  type        = bool
  default     = false
}

variable "deny_deletes_except_gc" {
  description = "Add a bucket-policy guard that denies object deletion to every principal but the garbage-collector role and admin_principal_arns. Set false (and apply) before tearing a non-empty run down."
  type        = bool
  default     = true
}

variable "admin_principal_arns" {
  description = "Extra IAM role or user ARNs allowed to delete objects despite the guard (e.g. an operator's admin role)."
  type        = list(string)
  default     = []
}

variable "publisher_trusted_principal_arns" {
  description = "Principals allowed to assume the publisher role. Empty: any principal of this account that is itself allowed sts:AssumeRole on it."
  type        = list(string)
  default     = []
}

variable "worker_trusted_principal_arns" {
  description = "Principals allowed to assume the worker role (with a worker_id session tag). Empty: this account."
  type        = list(string)
  default     = []
}

variable "gc_trusted_principal_arns" {
  description = "Principals allowed to assume the garbage-collector role. Empty: this account."
  type        = list(string)
  default     = []
}

variable "list_bucket_scope" {
  description = "s3:ListBucket scope of the three roles (see modules/iam): \"prefix\" (least privilege; a missing key answers 403) or \"bucket\" (a missing key answers 404)."
  type        = string
  default     = "bucket"
}

variable "cli_profiles" {
  description = "AWS profile the CLI should use per region label, written into regions.toml. A label not listed gets \"\" (the default credential chain)."
  type        = map(string)
  default     = {}
}

variable "cli_endpoint_urls" {
  description = "S3 endpoint URL per region label for regions.toml (e.g. a VPC or dual-stack endpoint). A label not listed gets \"\" (the provider's default endpoint)."
  type        = map(string)
  default     = {}
}

variable "force_destroy" {
  description = "Let `terraform destroy` remove buckets that still hold objects (demo runs only)."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags applied to every resource through the providers' default_tags."
  type        = map(string)
  default = {
    project = "wanrl-s3"
  }
}
