# Test harness, not a deployment: calls the three modules with literal inputs
# so that `terraform plan` can render every policy document and rule without
# AWS. The only API it reaches is STS GetCallerIdentity, answered by the moto
# server the test starts on 127.0.0.1. tests/terraform/test_rendered_policies.py
# copies this directory next to a copy of terraform/.

terraform {
  required_version = ">= 1.3.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}

variable "endpoint" {
  description = "URL of the moto server that stands in for STS."
  type        = string
}

provider "aws" {
  region                      = "us-east-1"
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_region_validation      = true

  endpoints {
    s3  = var.endpoint
    iam = var.endpoint
    sts = var.endpoint
  }
}

locals {
  prefix  = "runs/exp-1"
  buckets = ["arn:aws:s3:::snap-use1", "arn:aws:s3:::snap-euw1", "arn:aws:s3:::snap-apne1"]
}

module "bucket" {
  source = "../terraform/modules/snapshot-bucket"

  bucket_name             = "snap-use1"
  prefix                  = local.prefix
  versioning_enabled      = true
  version_expiration_days = 14
  delete_principal_arns   = ["arn:aws:iam::123456789012:role/harness-gc"]
}

module "iam" {
  source = "../terraform/modules/iam"

  name_prefix       = "harness"
  prefix            = local.prefix
  bucket_arns       = local.buckets
  list_bucket_scope = "prefix" # the least-privilege option; the default is "bucket"
}

module "replication" {
  source = "../terraform/modules/replication"

  name              = "harness-replication"
  source_bucket_id  = "snap-use1"
  source_bucket_arn = local.buckets[0]
  prefix            = local.prefix
  destinations = {
    euw1  = { bucket_arn = local.buckets[1] }
    apne1 = { bucket_arn = local.buckets[2] }
  }
  replication_time_control = true
}
