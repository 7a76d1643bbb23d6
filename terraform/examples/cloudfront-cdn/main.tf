# One private snapshot bucket with CloudFront in front of it: the bucket's one
# policy takes the distribution's read statement through
# source_policy_documents, and workers read <cdn_url>/v/... with grants signed
# by the private half of public_key_pem (wanrl_s3.cdn.CloudFrontSigner).

provider "aws" {
  region = var.region
}

module "bucket" {
  source = "../../modules/snapshot-bucket"

  bucket_name             = var.bucket_name
  prefix                  = var.run_prefix
  source_policy_documents = [module.cdn.bucket_policy_json]
}

module "cdn" {
  source = "../../modules/cloudfront-cdn"

  name                        = var.name
  bucket_arn                  = module.bucket.bucket_arn
  bucket_regional_domain_name = module.bucket.bucket_regional_domain_name
  prefix                      = var.run_prefix
  public_keys                 = { primary = file(var.public_key_pem) }
}
