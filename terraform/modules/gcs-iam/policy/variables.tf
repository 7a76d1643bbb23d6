variable "bucket_names" {
  description = "Names of every regional snapshot bucket of the run. Each principal gets the same bindings on each of them."
  type        = list(string)
}

variable "prefix" {
  description = "Run prefix inside the buckets, without leading or trailing '/'."
  type        = string
}

variable "list_scope" {
  description = "\"prefix\": storage.objects.list only for list requests whose prefix starts with <prefix>/; \"bucket\": listing of the whole bucket."
  type        = string
}

variable "members" {
  description = "IAM members per principal (publisher, worker, gc), each keyed by a name known at plan time (the member itself may be computed)."
  type        = map(map(string))
}

variable "worker_status_members" {
  description = "Worker id -> IAM member that may write <prefix>/workers/<worker id>.json and no other status object."
  type        = map(string)
}
