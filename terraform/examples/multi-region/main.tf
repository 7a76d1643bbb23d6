# A primary and two replica regions for one run. In replicate mode the primary
# replicates to both replicas; in fanout and copy modes the buckets stand alone
# and the publisher or `wanrl-s3 relay` fills them.

data "aws_caller_identity" "current" {}

locals {
  replicate  = var.mode == "replicate"
  account_id = data.aws_caller_identity.current.account_id

  bucket_names = {
    for key, r in var.regions : key => "${var.name_prefix}-${r.label}-${local.account_id}"
  }

  delete_principal_arns = var.deny_deletes_except_gc ? concat([module.iam.gc_role_arn], var.admin_principal_arns) : []

  buckets = {
    primary   = module.primary
    replica_a = module.replica_a
    replica_b = module.replica_b
  }

  # Primary first: the order of the tables in regions.toml.
  toml_regions = [
    for key in ["primary", "replica_a", "replica_b"] : {
      label        = var.regions[key].label
      url          = local.buckets[key].url
      s3_region    = var.regions[key].s3_region
      endpoint_url = lookup(var.cli_endpoint_urls, var.regions[key].label, "")
      profile      = lookup(var.cli_profiles, var.regions[key].label, "")
      price_class  = "aws:${var.regions[key].s3_region}"
    }
  ]
}

module "primary" {
  source = "../../modules/snapshot-bucket"

  bucket_name             = local.bucket_names.primary
  prefix                  = var.run_prefix
  versioning_enabled      = local.replicate
  version_expiration_days = var.version_expiration_days
  delete_principal_arns   = local.delete_principal_arns
  force_destroy           = var.force_destroy
}

module "replica_a" {
  source    = "../../modules/snapshot-bucket"
  providers = { aws = aws.replica_a }

  bucket_name             = local.bucket_names.replica_a
  prefix                  = var.run_prefix
  versioning_enabled      = local.replicate
  version_expiration_days = var.version_expiration_days
  delete_principal_arns   = local.delete_principal_arns
  force_destroy           = var.force_destroy
}

module "replica_b" {
  source    = "../../modules/snapshot-bucket"
  providers = { aws = aws.replica_b }

  bucket_name             = local.bucket_names.replica_b
  prefix                  = var.run_prefix
  versioning_enabled      = local.replicate
  version_expiration_days = var.version_expiration_days
  delete_principal_arns   = local.delete_principal_arns
  force_destroy           = var.force_destroy
}

module "iam" {
  source = "../../modules/iam"

  name_prefix = var.name_prefix
  prefix      = var.run_prefix
  bucket_arns = [
    module.primary.bucket_arn,
    module.replica_a.bucket_arn,
    module.replica_b.bucket_arn,
  ]
  publisher_trusted_principal_arns = var.publisher_trusted_principal_arns
  worker_trusted_principal_arns    = var.worker_trusted_principal_arns
  gc_trusted_principal_arns        = var.gc_trusted_principal_arns
  list_bucket_scope                = var.list_bucket_scope
}

module "replication" {
  source = "../../modules/replication"
  count  = local.replicate ? 1 : 0

  name              = "${var.name_prefix}-replication"
  source_bucket_id  = module.primary.bucket_id
  source_bucket_arn = module.primary.bucket_arn
  prefix            = var.run_prefix
  destinations = {
    (var.regions.replica_a.label) = { bucket_arn = module.replica_a.bucket_arn }
    (var.regions.replica_b.label) = { bucket_arn = module.replica_b.bucket_arn }
  }
  replication_time_control = var.replication_time_control

  # S3 refuses a replication configuration until versioning is on at both ends.
  depends_on = [module.primary, module.replica_a, module.replica_b]
}
