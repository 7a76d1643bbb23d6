variable "name" {
  description = "Name of the load balancer's parts (backend bucket, URL map, proxy, certificate, address, forwarding rule), e.g. \"wanrl-exp-42\"."
  type        = string

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$", var.name))
    error_message = "name must be 1-42 lower-case letters, digits or '-', starting with a letter and not ending with '-'."
  }
}

variable "project" {
  description = "Project of the load balancer and the bucket; null takes the provider's project."
  type        = string
  default     = null
}

variable "bucket_name" {
  description = "Name of the private snapshot bucket (modules/gcs-snapshot-bucket's bucket_name)."
  type        = string
}

variable "prefix" {
  description = "Run prefix inside the bucket, without leading or trailing '/', e.g. \"runs/exp-42\". Only <prefix>/v/ is readable through the CDN."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.()-]+(/[A-Za-z0-9!_.()-]+)*$", var.prefix))
    error_message = "prefix must be non-empty, must not start or end with '/', must not contain '//' and may use only letters, digits and !_.()- between the slashes (it is written into an IAM condition)."
  }
}

variable "domains" {
  description = "Domain names served with a Google-managed certificate; their DNS must point at ip_address. The first one makes cdn_url."
  type        = list(string)

  validation {
    condition     = length(var.domains) >= 1
    error_message = "domains must name at least one domain."
  }
}

variable "signed_url_key_names" {
  description = "Names of the backend's signed URL keys (1 to 3, Cloud CDN's limit); two let one be rotated out while the other signs."
  type        = list(string)

  validation {
    condition     = length(var.signed_url_key_names) >= 1 && length(var.signed_url_key_names) <= 3 && alltrue([for n in var.signed_url_key_names : can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", n))])
    error_message = "signed_url_key_names must hold 1 to 3 names of lower-case letters, digits and '-', starting with a letter."
  }
}

variable "signed_url_key_values" {
  description = "The keys, name => 16 random bytes in base64url (head -c 16 /dev/urandom | base64 | tr +/ -_). Keep them in a secret store: they are in the state too."
  type        = map(string)
  sensitive   = true

  validation {
    condition     = alltrue([for v in values(var.signed_url_key_values) : can(regex("^[A-Za-z0-9_-]{22}(==)?$", v))])
    error_message = "Each signed URL key must be 16 bytes in base64url: 22 characters of A-Z a-z 0-9 - _, optionally followed by '=='."
  }
}

variable "signed_url_cache_max_age_s" {
  description = "Seconds Cloud CDN keeps a response to a signed request (it overrides the origin's Cache-Control for them). Only <prefix>/v/ is served, and it never changes, so a long time is safe."
  type        = number
  default     = 31536000

  validation {
    condition     = var.signed_url_cache_max_age_s >= 0 && var.signed_url_cache_max_age_s <= 31536000
    error_message = "signed_url_cache_max_age_s must be between 0 and 31536000 (a year)."
  }
}

variable "labels" {
  description = "Labels applied to the forwarding rule."
  type        = map(string)
  default     = {}
}
