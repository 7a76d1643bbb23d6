output "cdn_url" {
  description = "What the trainer passes to CloudFrontSigner.grant and workers to --cdn-url."
  value       = module.cdn.cdn_url
}

output "key_pair_id" {
  description = "The Key-Pair-Id of the public key, for CloudFrontSigner(key_pair_id, ...)."
  value       = module.cdn.public_key_ids["primary"]
}

output "store_url" {
  description = "s3:// URL of the run prefix, where the trainer publishes and workers read LATEST."
  value       = module.bucket.url
}
