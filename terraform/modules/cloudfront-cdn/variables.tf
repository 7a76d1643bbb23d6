variable "name" {
  description = "Name of the distribution's parts (origin access control, key group, cache policies), unique in the account, e.g. \"wanrl-exp-42\"."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,48}$", var.name))
    error_message = "name must be 1-48 letters, digits, '_' or '-' (the cache policy names add a suffix)."
  }
}

variable "bucket_arn" {
  description = "ARN of the snapshot bucket (modules/snapshot-bucket's bucket_arn)."
  type        = string
}

variable "bucket_regional_domain_name" {
  description = "Regional domain name of the snapshot bucket, <bucket>.s3.<region>.amazonaws.com (modules/snapshot-bucket's bucket_regional_domain_name)."
  type        = string
}

variable "prefix" {
  description = "Run prefix inside the bucket, without leading or trailing '/', e.g. \"runs/exp-42\". Key K of the run is served at https://<domain>/<prefix>/K."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9!_.'()-]+(/[A-Za-z0-9!_.'()-]+)*$", var.prefix))
    error_message = "prefix must be non-empty, must not start or end with '/', must not contain '//' and may use only S3's safe key characters other than '*'."
  }
}

variable "public_keys" {
  description = "Public keys of the key group, name => PEM (RSA 2048 or ECDSA P-256). Their private halves sign URLs and cookies; two keys let one be rotated out while the other signs."
  type        = map(string)

  validation {
    condition     = length(var.public_keys) >= 1 && length(var.public_keys) <= 5
    error_message = "public_keys must hold 1 to 5 keys (CloudFront's limit per key group)."
  }

  validation {
    condition     = alltrue([for pem in values(var.public_keys) : startswith(trimspace(pem), "-----BEGIN PUBLIC KEY-----")])
    error_message = "Each public key must be a PEM public key (-----BEGIN PUBLIC KEY-----); never pass the private key here."
  }
}

variable "immutable_default_ttl_s" {
  description = "Seconds CloudFront keeps an object under <prefix>/v/ whose origin response carries no Cache-Control. Objects there never change once committed, so a long time is safe."
  type        = number
  default     = 31536000

  validation {
    condition     = var.immutable_default_ttl_s >= 0 && var.immutable_default_ttl_s <= var.immutable_max_ttl_s
    error_message = "immutable_default_ttl_s must be between 0 and immutable_max_ttl_s."
  }
}

variable "immutable_max_ttl_s" {
  description = "Longest time, in seconds, CloudFront keeps an object under <prefix>/v/ whatever its Cache-Control says."
  type        = number
  default     = 31536000

  validation {
    condition     = var.immutable_max_ttl_s >= 1
    error_message = "immutable_max_ttl_s must be at least 1."
  }
}

variable "price_class" {
  description = "CloudFront price class: PriceClass_100 (North America, Europe), PriceClass_200 or PriceClass_All."
  type        = string
  default     = "PriceClass_100"

  validation {
    condition     = contains(["PriceClass_100", "PriceClass_200", "PriceClass_All"], var.price_class)
    error_message = "price_class must be PriceClass_100, PriceClass_200 or PriceClass_All."
  }
}

variable "aliases" {
  description = "Alternate domain names (CNAMEs) served with acm_certificate_arn's certificate; empty uses dXXXX.cloudfront.net."
  type        = list(string)
  default     = []
}

variable "acm_certificate_arn" {
  description = "ACM certificate (in us-east-1) for aliases; null uses the default *.cloudfront.net certificate."
  type        = string
  default     = null
}

variable "web_acl_id" {
  description = "ARN of an AWS WAF web ACL to attach, or null for none (signed requests already gate every behaviour)."
  type        = string
  default     = null
}

variable "logging_bucket_domain_name" {
  description = "Domain name of a bucket for standard access logs (<bucket>.s3.amazonaws.com), or null for no access logs."
  type        = string
  default     = null
}

variable "tags" {
  description = "Tags applied to the distribution."
  type        = map(string)
  default     = {}
}
