terraform {
  required_version = ">= 1.3.0"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.0"
    }
  }
}

# One provider per region: the primary (trainer side, IAM, replication) and two
# replicas. Credentials come from the usual chain (AWS_PROFILE, SSO, env, ...).
provider "aws" {
  region = var.regions.primary.s3_region

  default_tags {
    tags = var.tags
  }
}

provider "aws" {
  alias  = "replica_a"
  region = var.regions.replica_a.s3_region

  default_tags {
    tags = var.tags
  }
}

provider "aws" {
  alias  = "replica_b"
  region = var.regions.replica_b.s3_region

  default_tags {
    tags = var.tags
  }
}
