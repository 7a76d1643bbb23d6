# One regional snapshot bucket on Google Cloud Storage: private (uniform
# bucket-level access, public access prevention enforced), optionally CMEK
# encrypted, with lifecycle rules that clean up after the protocol's failure
# modes. Who may do what is modules/gcs-iam's job: IAM conditions on object
# names need uniform bucket-level access, which this bucket always has.
#
# Nothing here can stop the garbage collector's deletes: there is no retention
# policy (bucket lock) and no object hold. Soft delete keeps a deleted object
# restorable (and billed) for soft_delete_retention_days; versioning, when on,
# turns a delete into a noncurrent generation that a lifecycle rule removes.

locals {
  versions_prefix = "${var.prefix}/v/"
  uploads_prefix  = "${var.prefix}/.uploads/"
  expire_versions = var.version_expiration_days != null
}

resource "google_storage_bucket" "this" {
  #checkov:skip=CKV_GCP_62:Usage logs need a separate log bucket in every location, which this module does not own; audit the run prefix with Cloud Audit Logs data access logs (DATA_READ, DATA_WRITE) on storage.googleapis.com instead.
  #checkov:skip=CKV_GCP_78:Versioning is optional (versioning_enabled): the protocol never overwrites a snapshot, wanrl-s3 gc is the retention policy, and a noncurrent copy of every deleted payload doubles storage; soft delete covers accidental deletion.
  name                        = var.bucket_name
  project                     = var.project
  location                    = var.location
  storage_class               = var.storage_class
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.force_destroy
  labels                      = var.labels

  versioning {
    enabled = var.versioning_enabled
  }

  soft_delete_policy {
    retention_duration_seconds = var.soft_delete_retention_days * 86400
  }

  dynamic "encryption" {
    for_each = var.kms_key_name == null ? [] : [var.kms_key_name]
    content {
      default_kms_key_name = encryption.value
    }
  }

  # Backstop for abandoned runs; the garbage collector is what normally deletes
  # old versions, keeping every retained delta chain whole. Off by default.
  dynamic "lifecycle_rule" {
    for_each = local.expire_versions ? [var.version_expiration_days] : []
    content {
      condition {
        age            = lifecycle_rule.value
        matches_prefix = [local.versions_prefix]
      }
      action {
        type = "Delete"
      }
    }
  }

  # Parts and markers of uploads a crashed publisher left behind (the gs://
  # store stages large uploads as objects under <prefix>/.uploads/ and joins
  # them with compose; see wanrl_s3/store/staging.py).
  lifecycle_rule {
    condition {
      age            = var.stale_upload_days
      matches_prefix = [local.uploads_prefix]
    }
    action {
      type = "Delete"
    }
  }

  # With versioning on, every LATEST move and status write leaves a noncurrent
  # generation, and every delete turns the live one noncurrent.
  dynamic "lifecycle_rule" {
    for_each = var.versioning_enabled ? [var.noncurrent_version_expiration_days] : []
    content {
      condition {
        days_since_noncurrent_time = lifecycle_rule.value
        with_state                 = "ARCHIVED"
      }
      action {
        type = "Delete"
      }
    }
  }
}
