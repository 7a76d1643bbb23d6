output "distribution_id" {
  description = "ID of the CloudFront distribution (for invalidations and monitoring)."
  value       = aws_cloudfront_distribution.this.id
}

output "distribution_arn" {
  description = "ARN of the distribution, the AWS:SourceArn the bucket policy admits."
  value       = aws_cloudfront_distribution.this.arn
}

output "domain_name" {
  description = "The distribution's domain name, dXXXX.cloudfront.net."
  value       = aws_cloudfront_distribution.this.domain_name
}

output "cdn_url" {
  description = "URL at which the run prefix is served (key K at <cdn_url>/K): what --cdn-url and CdnSigner.grant take."
  value       = "https://${length(var.aliases) > 0 ? var.aliases[0] : aws_cloudfront_distribution.this.domain_name}/${var.prefix}"
}

output "key_group_id" {
  description = "ID of the key group every behaviour trusts."
  value       = aws_cloudfront_key_group.this.id
}

output "public_key_ids" {
  description = "CloudFront id of each public key, by the name given in public_keys: the key_pair_id a signer passes (Key-Pair-Id)."
  value       = { for name, key in aws_cloudfront_public_key.this : name => key.id }
}

output "bucket_policy_json" {
  description = "Bucket policy statement letting only this distribution read <prefix>/v/* and <prefix>/LATEST; pass it to modules/snapshot-bucket's source_policy_documents."
  value       = data.aws_iam_policy_document.bucket.json
}
