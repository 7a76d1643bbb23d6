variable "name_prefix" {
  description = "Prefix of the service accounts (<name_prefix>-publisher, -worker, -gc) and of the custom role ids (<name_prefix with '_' for '-'>_wanrl_reader, _creator, _deleter): 3-20 lower-case letters, digits and '-'."
  type        = string

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{1,18}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 3-20 characters of lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (service account ids are at most 30 characters)."
  }
}

variable "project" {
  description = "Project of the service accounts and custom roles; null takes the provider's project."
  type        = string
  default     = null
}

variable "bucket_names" {
  description = "Names of every regional snapshot bucket of the run (from modules/gcs-snapshot-bucket). Each principal gets the same bindings on each of them."
  type        = list(string)

  validation {
    condition     = length(var.bucket_names) > 0
    error_message = "bucket_names must name at least one bucket."
  }
}

variable "prefix" {
  description = "Run prefix inside the buckets, without leading or trailing '/'. No binding reaches names outside it."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.()-]+(/[A-Za-z0-9!_.()-]+)*$", var.prefix))
    error_message = "prefix must be non-empty, must not start or end with '/', must not contain '//' and may use only letters, digits and !_.()- between the slashes (it is written into IAM conditions)."
  }
}

variable "list_scope" {
  description = "\"prefix\" (least privilege): storage.objects.list only for list requests whose prefix starts with <prefix>/ (the IAM condition attribute storage.googleapis.com/objectListPrefix); every list the gs:// store makes has such a prefix. \"bucket\": listing of the whole bucket (names outside the prefix become visible, their content does not)."
  type        = string
  default     = "prefix"

  validation {
    condition     = contains(["prefix", "bucket"], var.list_scope)
    error_message = "list_scope must be \"prefix\" or \"bucket\"."
  }
}

variable "publisher_members" {
  description = "Further IAM members (e.g. a Workload Identity Federation principal://... or an existing serviceAccount:...) that get the publisher's bindings directly, besides the publisher service account."
  type        = list(string)
  default     = []
}

variable "worker_members" {
  description = "Further IAM members that get the shared worker bindings directly (read the run, replace any status object under workers/)."
  type        = list(string)
  default     = []
}

variable "gc_members" {
  description = "Further IAM members that get the garbage collector's bindings directly."
  type        = list(string)
  default     = []
}

variable "worker_status_members" {
  description = "Worker id -> IAM member (one identity per worker, e.g. a per-VM service account or a Workload Identity Federation principal://.../subject/<pod>) that may read the run and replace only <prefix>/workers/<worker id>.json: the id is pinned by identity, not chosen by the worker."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for id in keys(var.worker_status_members) : can(regex("^[A-Za-z0-9._-]{1,128}$", id))])
    error_message = "worker ids must be 1-128 letters, digits or '._-' (what wanrl-s3 accepts as a worker id)."
  }
}

variable "publisher_impersonators" {
  description = "IAM members allowed to impersonate the publisher service account (roles/iam.serviceAccountTokenCreator on it)."
  type        = list(string)
  default     = []
}

variable "worker_impersonators" {
  description = "IAM members allowed to impersonate the worker service account (roles/iam.serviceAccountTokenCreator on it)."
  type        = list(string)
  default     = []
}

variable "gc_impersonators" {
  description = "IAM members allowed to impersonate the garbage-collector service account (roles/iam.serviceAccountTokenCreator on it)."
  type        = list(string)
  default     = []
}
