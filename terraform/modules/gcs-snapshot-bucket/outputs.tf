output "bucket_name" {
  description = "Name of the bucket."
  value       = google_storage_bucket.this.name
}

output "location" {
  description = "Location of the bucket (region, dual- or multi-region), as GCS reports it."
  value       = google_storage_bucket.this.location
}

output "prefix" {
  description = "Run prefix inside the bucket."
  value       = var.prefix
}

output "url" {
  description = "gs:// URL of the run prefix, as the regions file and the CLI take it."
  value       = "gs://${google_storage_bucket.this.name}/${var.prefix}"
}

output "endpoint_url" {
  description = "Endpoint for the regions file: empty, so the client uses Google's default JSON API endpoint with application default credentials."
  value       = ""
}

output "price_class" {
  description = "Price class for the regions file and the planner: gcs:<location in lower case>."
  value       = "gcs:${lower(var.location)}"
}

output "versioning_enabled" {
  description = "Whether object versioning is on."
  value       = google_storage_bucket.this.versioning[0].enabled
}

output "kms_key_name" {
  description = "Cloud KMS key used for default encryption, or null for Google-managed keys."
  value       = var.kms_key_name
}
