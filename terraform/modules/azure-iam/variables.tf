variable "name_prefix" {
  description = "Prefix of the managed identities (<name_prefix>-publisher, -worker, -gc) and of the custom role names (\"<name_prefix> wanrl-s3 blob reader\", writer, deleter; role names are unique in the tenant)."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9_-]{1,50}$", var.name_prefix))
    error_message = "name_prefix must be 2-51 letters, digits, '_' or '-', starting with a letter or digit."
  }
}

variable "resource_group_name" {
  description = "Resource group of the three managed identities."
  type        = string
}

variable "location" {
  description = "Azure region of the managed identities (any region; they work for every container)."
  type        = string
}

variable "role_definition_scope" {
  description = "Scope the custom roles are defined in and assignable at: a subscription (/subscriptions/<id>) or a resource group id that contains every container of the run."
  type        = string
}

variable "container_scopes" {
  description = "Region label -> Resource Manager id of the run's container there (container_scope of modules/azure-snapshot-container). Each principal gets the same assignments on each."
  type        = map(string)

  validation {
    condition     = length(var.container_scopes) > 0
    error_message = "container_scopes must name at least one container."
  }
}

variable "prefix" {
  description = "Run prefix inside the containers, without leading or trailing '/'. No assignment reaches blobs outside it."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.()-]+(/[A-Za-z0-9!_.()-]+)*$", var.prefix))
    error_message = "prefix must be non-empty, must not start or end with '/', must not contain '//' and may use only letters, digits and !_.()- between the slashes (it is written into role assignment conditions)."
  }
}

variable "list_scope" {
  description = "\"prefix\" (least privilege): List Blobs only with a prefix under <prefix>/, which every list the az:// store makes has. \"container\": listing of the whole container (names outside the prefix become visible, their content does not)."
  type        = string
  default     = "prefix"

  validation {
    condition     = contains(["prefix", "container"], var.list_scope)
    error_message = "list_scope must be \"prefix\" or \"container\"."
  }
}

variable "publisher_principal_ids" {
  description = "Further Entra ID object ids (service principals, groups, other managed identities) that get the publisher's assignments, besides the publisher identity."
  type        = list(string)
  default     = []
}

variable "worker_principal_ids" {
  description = "Further Entra ID object ids that get the shared worker assignments (read the run, write any status blob under workers/)."
  type        = list(string)
  default     = []
}

variable "gc_principal_ids" {
  description = "Further Entra ID object ids that get the garbage collector's assignments."
  type        = list(string)
  default     = []
}

variable "worker_status_principal_ids" {
  description = "Worker id -> Entra ID object id (one identity per worker) that may read the run and write only <prefix>/workers/<worker id>.json: the id is pinned by identity, not chosen by the worker."
  type        = map(string)
  default     = {}

  validation {
    condition     = alltrue([for id in keys(var.worker_status_principal_ids) : can(regex("^[A-Za-z0-9._-]{1,128}$", id))])
    error_message = "worker ids must be 1-128 letters, digits or '._-' (what wanrl-s3 accepts as a worker id)."
  }
}

variable "tags" {
  description = "Tags applied to the managed identities."
  type        = map(string)
  default     = {}
}
