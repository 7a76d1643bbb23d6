variable "container_scopes" {
  description = "Region label -> Resource Manager id of the run's container in that region. Each principal gets the same assignments on each of them."
  type        = map(string)
}

variable "prefix" {
  description = "Run prefix inside the containers, without leading or trailing '/'."
  type        = string
}

variable "list_scope" {
  description = "\"prefix\": List Blobs only with a prefix under <prefix>/; \"container\": listing of the whole container."
  type        = string
}

variable "principals" {
  description = "Principal object ids per principal (publisher, worker, gc), each keyed by a name known at plan time (the id itself may be computed)."
  type        = map(map(string))
}

variable "worker_status_principals" {
  description = "Worker id -> principal object id that may write <prefix>/workers/<worker id>.json and no other status blob."
  type        = map(string)
}
