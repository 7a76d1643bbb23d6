output "cdn_url" {
  description = "URL at which the run prefix is served (key K at <cdn_url>/K): what --cdn-url and CdnSigner.grant take."
  value       = "https://${var.domains[0]}/${var.prefix}"
}

output "ip_address" {
  description = "The load balancer's global IP address: point the DNS records of domains at it."
  value       = google_compute_global_address.this.address
}

output "backend_bucket_name" {
  description = "Name of the CDN-enabled backend bucket the signed URL keys belong to."
  value       = google_compute_backend_bucket.this.name
}

output "signed_url_key_names" {
  description = "Names of the backend's signed URL keys: the KeyName a signer passes."
  value       = sort([for key in google_compute_backend_bucket_signed_url_key.this : key.name])
}

output "cache_fill_member" {
  description = "The Cloud CDN cache-fill service agent that may read <prefix>/v/ of the bucket."
  value       = local.fill_agent
}
