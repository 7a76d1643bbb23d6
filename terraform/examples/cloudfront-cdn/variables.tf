variable "region" {
  description = "AWS region of the snapshot bucket."
  type        = string
  default     = "us-east-1"
}

variable "bucket_name" {
  description = "Name of the snapshot bucket (globally unique)."
  type        = string
}

variable "run_prefix" {
  description = "Run prefix inside the bucket, e.g. \"runs/exp-42\"."
  type        = string
}

variable "name" {
  description = "Name of the distribution's parts, unique in the account, e.g. \"wanrl-exp-42\"."
  type        = string
  default     = "wanrl-snapshots"
}

variable "public_key_pem" {
  description = "Path of the PEM public key (RSA 2048 or ECDSA P-256) whose private half signs grants: openssl rsa -in private_key.pem -pubout -out public_key.pem."
  type        = string
}
