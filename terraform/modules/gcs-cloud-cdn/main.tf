# Cloud CDN in front of one private GCS snapshot bucket, behind a global
# external Application Load Balancer. The bucket stays private (modules/
# gcs-snapshot-bucket enforces public access prevention): Cloud CDN fills its
# cache as its own service agent, service-<project number>@cloud-cdn-fill,
# which may read only the run's versions, <prefix>/v/, by an IAM condition.
# Viewers need a URL, URL prefix or cookie signed with one of the backend's
# keys (wanrl_s3.cdn.CloudCdnSigner).
#
# Caching is correct by construction: objects under <prefix>/v/ never change
# once committed, so Cloud CDN may keep them for signed_url_cache_max_age_s
# (Cloud CDN treats every response to a signed request as
# "Cache-Control: public, max-age=<that>"); LATEST is not readable through the
# CDN at all (the cache-fill agent may not read it), so a stale pointer can
# never be served: readers take LATEST from the store itself.

locals {
  versions_prefix = "${var.prefix}/v/"
  fill_agent      = "serviceAccount:service-${data.google_project.this.number}@cloud-cdn-fill.iam.gserviceaccount.com"
}

data "google_project" "this" {
  project_id = var.project
}

resource "google_compute_backend_bucket" "this" {
  name        = var.name
  project     = var.project
  description = "wanrl-s3 snapshots of ${var.prefix}"
  bucket_name = var.bucket_name
  enable_cdn  = true

  cdn_policy {
    cache_mode                   = "USE_ORIGIN_HEADERS"
    signed_url_cache_max_age_sec = var.signed_url_cache_max_age_s
    request_coalescing           = true
  }
}

resource "google_compute_backend_bucket_signed_url_key" "this" {
  for_each = toset(var.signed_url_key_names)

  name           = each.key
  project        = var.project
  key_value      = lookup(var.signed_url_key_values, each.key, "")
  backend_bucket = google_compute_backend_bucket.this.name

  lifecycle {
    precondition {
      condition     = contains(keys(var.signed_url_key_values), each.key)
      error_message = "signed_url_key_values has no key for a name in signed_url_key_names."
    }
  }
}

# The cache-fill agent exists once the backend has a signed URL key, hence the
# dependency. The condition limits it to the run's immutable versions.
resource "google_storage_bucket_iam_member" "cache_fill" {
  bucket = var.bucket_name
  role   = "roles/storage.objectViewer"
  member = local.fill_agent

  condition {
    title       = "${var.name}-versions-only"
    description = "Cloud CDN may fill its cache from the run's immutable versions only"
    expression  = "resource.name.startsWith('projects/_/buckets/${var.bucket_name}/objects/${local.versions_prefix}')"
  }

  depends_on = [google_compute_backend_bucket_signed_url_key.this]
}

resource "google_compute_url_map" "this" {
  name            = var.name
  project         = var.project
  description     = "wanrl-s3 snapshots: every path to the CDN-enabled backend bucket"
  default_service = google_compute_backend_bucket.this.id
}

resource "google_compute_managed_ssl_certificate" "this" {
  name    = var.name
  project = var.project

  managed {
    domains = var.domains
  }
}

resource "google_compute_ssl_policy" "this" {
  name            = var.name
  project         = var.project
  profile         = "MODERN"
  min_tls_version = "TLS_1_2"
}

resource "google_compute_target_https_proxy" "this" {
  name             = var.name
  project          = var.project
  url_map          = google_compute_url_map.this.id
  ssl_certificates = [google_compute_managed_ssl_certificate.this.id]
  ssl_policy       = google_compute_ssl_policy.this.id
}

resource "google_compute_global_address" "this" {
  name    = var.name
  project = var.project
}

resource "google_compute_global_forwarding_rule" "this" {
  name                  = var.name
  project               = var.project
  target                = google_compute_target_https_proxy.this.id
  ip_address            = google_compute_global_address.this.address
  port_range            = "443"
  load_balancing_scheme = "EXTERNAL_MANAGED"
  labels                = var.labels
}
