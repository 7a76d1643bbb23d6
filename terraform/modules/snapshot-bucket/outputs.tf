output "bucket_id" {
  description = "Name of the bucket."
  value       = aws_s3_bucket.this.id
}

output "bucket_arn" {
  description = "ARN of the bucket."
  value       = aws_s3_bucket.this.arn
}

output "bucket_regional_domain_name" {
  description = "Regional domain name of the bucket (<bucket>.s3.<region>.amazonaws.com), the origin a CDN reads."
  value       = aws_s3_bucket.this.bucket_regional_domain_name
}

output "region" {
  description = "AWS region the bucket lives in (that of the provider passed to the module)."
  value       = data.aws_region.current.name
}

output "prefix" {
  description = "Run prefix inside the bucket."
  value       = var.prefix
}

output "url" {
  description = "s3:// URL of the run prefix, as the regions file and the CLI take it."
  value       = "s3://${aws_s3_bucket.this.id}/${var.prefix}"
}

output "versioning_enabled" {
  description = "Whether object versioning is on (read from the versioning resource, so replication set up after it waits for it)."
  value       = length(aws_s3_bucket_versioning.this) > 0 && one(aws_s3_bucket_versioning.this[*].versioning_configuration[0].status) == "Enabled"
}

output "kms_key_arn" {
  description = "KMS key used for default encryption, or null for SSE-S3."
  value       = var.kms_key_arn
}
