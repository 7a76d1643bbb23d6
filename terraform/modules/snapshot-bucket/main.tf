# One regional snapshot bucket: private, encrypted, TLS-only, owner-enforced,
# with lifecycle rules that clean up after the protocol's failure modes.

data "aws_region" "current" {}
data "aws_partition" "current" {}

locals {
  # Built from the name rather than read from the bucket, so the policy can be
  # rendered at plan time.
  bucket_arn      = "arn:${data.aws_partition.current.partition}:s3:::${var.bucket_name}"
  versions_prefix = "${var.prefix}/v/"
  use_kms         = var.kms_key_arn != null
  expire_versions = var.version_expiration_days != null
}

resource "aws_s3_bucket" "this" {
  # Each suppression below says why the check does not fit a snapshot bucket.
  #checkov:skip=CKV_AWS_18:Server access logs need a separate log bucket in every region, which this module does not own; audit the run prefix with CloudTrail S3 data events or add aws_s3_bucket_logging beside the module.
  #checkov:skip=CKV_AWS_144:Cross-region replication is optional by design (fanout and copy modes need none, and replicas are replication targets, not sources); modules/replication turns it on for the primary in replicate mode.
  #checkov:skip=CKV2_AWS_62:Nothing consumes S3 event notifications: workers poll LATEST, which works the same on every S3-compatible store (R2, GCS, MinIO).
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_ownership_controls" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket = aws_s3_bucket.this.id

  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.id

  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = local.use_kms ? "aws:kms" : "AES256"
      kms_master_key_id = var.kms_key_arn
    }
    bucket_key_enabled = local.use_kms
  }
}

resource "aws_s3_bucket_versioning" "this" {
  count  = var.versioning_enabled ? 1 : 0
  bucket = aws_s3_bucket.this.id

  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "this" {
  bucket = aws_s3_bucket.this.id

  # Backstop for abandoned runs; the garbage collector is what normally
  # deletes old versions, keeping every retained delta chain whole. (Static
  # rule blocks with a status switch, not a dynamic block: scanners such as
  # checkov drop the static rules of a block that mixes both.)
  rule {
    id     = "expire-snapshot-versions"
    status = local.expire_versions ? "Enabled" : "Disabled"

    filter {
      prefix = local.versions_prefix
    }

    expiration {
      days = local.expire_versions ? var.version_expiration_days : 36500
    }
  }

  # A publisher that dies mid-upload leaves parts that are billed but invisible.
  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"

    # Empty prefix: every key (written out, as S3 echoes it back this way).
    filter {
      prefix = ""
    }

    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_incomplete_multipart_days
    }
  }

  # With versioning on, every LATEST move and every status write leaves a
  # noncurrent version, and deletions leave delete markers.
  rule {
    id     = "expire-noncurrent-versions"
    status = "Enabled"

    # Empty prefix: every key (written out, as S3 echoes it back this way).
    filter {
      prefix = ""
    }

    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_expiration_days
    }

    expiration {
      expired_object_delete_marker = true
    }
  }

  depends_on = [aws_s3_bucket_versioning.this]
}

data "aws_iam_policy_document" "bucket" {
  # Statements other modules need in the bucket's one policy (the CDN's read).
  source_policy_documents = var.source_policy_documents

  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      local.bucket_arn,
      "${local.bucket_arn}/*",
    ]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }

  statement {
    sid     = "DenyTlsOlderThan12"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      local.bucket_arn,
      "${local.bucket_arn}/*",
    ]

    principals {
      type        = "*"
      identifiers = ["*"]
    }

    condition {
      test     = "NumericLessThan"
      variable = "s3:TlsVersion"
      values   = ["1.2"]
    }
  }

  dynamic "statement" {
    for_each = length(var.delete_principal_arns) > 0 ? [var.delete_principal_arns] : []
    content {
      sid       = "DenyDeleteExceptGarbageCollector"
      effect    = "Deny"
      actions   = ["s3:DeleteObject", "s3:DeleteObjectVersion"]
      resources = ["${local.bucket_arn}/*"]

      principals {
        type        = "*"
        identifiers = ["*"]
      }

      condition {
        test     = "ArnNotEquals"
        variable = "aws:PrincipalArn"
        values   = statement.value
      }
    }
  }
}

resource "aws_s3_bucket_policy" "this" {
  bucket = aws_s3_bucket.this.id
  policy = data.aws_iam_policy_document.bucket.json

  # S3 rejects a policy while the public access block is still being applied.
  depends_on = [aws_s3_bucket_public_access_block.this]
}
