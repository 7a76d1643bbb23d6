# Cross-region replication from the primary bucket to every replica, and the
# role S3 assumes to do it. Replication gives no ordering between objects, so
# readers in a replica region treat a version whose payload or manifest is
# still missing as not yet visible.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  metrics_on = var.replication_time_control || var.replication_metrics

  # One rule per (destination, key prefix): a V2 rule has one destination and
  # one filter prefix. Priorities must be unique within the configuration.
  rules = flatten([
    for d_index, label in sort(keys(var.destinations)) : [
      for p_index, sub in var.replicated_subprefixes : {
        id       = "${label}-${replace(trimsuffix(sub, "/"), "/", "-")}"
        label    = label
        prefix   = "${var.prefix}/${sub}"
        priority = d_index * length(var.replicated_subprefixes) + p_index
      }
    ]
  ])

  replicated_object_arns = [
    for sub in var.replicated_subprefixes : "${var.source_bucket_arn}/${var.prefix}/${sub}*"
  ]
  destination_object_arns = flatten([
    for d in values(var.destinations) : [
      for sub in var.replicated_subprefixes : "${d.bucket_arn}/${var.prefix}/${sub}*"
    ]
  ])
  replica_kms_key_arns = compact([for d in values(var.destinations) : d.replica_kms_key_arn])
}

data "aws_iam_policy_document" "assume" {
  statement {
    sid     = "S3ReplicationService"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["s3.amazonaws.com"]
    }

    # Confused-deputy guard: only S3 acting for this account's source bucket.
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }

    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = [var.source_bucket_arn]
    }
  }
}

resource "aws_iam_role" "this" {
  name               = var.name
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

data "aws_iam_policy_document" "replication" {
  statement {
    sid       = "ReadReplicationConfiguration"
    actions   = ["s3:GetReplicationConfiguration", "s3:ListBucket"]
    resources = [var.source_bucket_arn]
  }

  statement {
    sid = "ReadSourceVersions"
    actions = [
      "s3:GetObjectVersionForReplication",
      "s3:GetObjectVersionAcl",
      "s3:GetObjectVersionTagging",
    ]
    resources = local.replicated_object_arns
  }

  # ReplicateDelete writes delete markers only; it cannot remove a version.
  statement {
    sid = "WriteReplicas"
    actions = concat(
      ["s3:ReplicateObject", "s3:ReplicateTags"],
      var.replicate_delete_markers ? ["s3:ReplicateDelete"] : [],
    )
    resources = local.destination_object_arns
  }

  dynamic "statement" {
    for_each = var.source_kms_key_arn == null ? [] : [var.source_kms_key_arn]
    content {
      sid       = "DecryptSource"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${data.aws_region.current.name}.amazonaws.com"]
      }
    }
  }

  dynamic "statement" {
    for_each = length(local.replica_kms_key_arns) == 0 ? [] : [local.replica_kms_key_arns]
    content {
      sid       = "EncryptReplicas"
      actions   = ["kms:Encrypt", "kms:GenerateDataKey"]
      resources = statement.value
    }
  }
}

resource "aws_iam_role_policy" "this" {
  name   = "${var.name}-replication"
  role   = aws_iam_role.this.id
  policy = data.aws_iam_policy_document.replication.json
}

resource "aws_s3_bucket_replication_configuration" "this" {
  bucket = var.source_bucket_id
  role   = aws_iam_role.this.arn

  dynamic "rule" {
    for_each = local.rules
    content {
      id       = rule.value.id
      status   = "Enabled"
      priority = rule.value.priority

      filter {
        prefix = rule.value.prefix
      }

      delete_marker_replication {
        status = var.replicate_delete_markers ? "Enabled" : "Disabled"
      }

      dynamic "source_selection_criteria" {
        for_each = var.source_kms_key_arn == null ? [] : [true]
        content {
          sse_kms_encrypted_objects {
            status = "Enabled"
          }
        }
      }

      destination {
        bucket        = var.destinations[rule.value.label].bucket_arn
        storage_class = var.destinations[rule.value.label].storage_class

        dynamic "encryption_configuration" {
          for_each = var.destinations[rule.value.label].replica_kms_key_arn == null ? [] : [var.destinations[rule.value.label].replica_kms_key_arn]
          content {
            replica_kms_key_id = encryption_configuration.value
          }
        }

        dynamic "replication_time" {
          for_each = var.replication_time_control ? [true] : []
          content {
            status = "Enabled"
            time {
              minutes = 15
            }
          }
        }

        dynamic "metrics" {
          for_each = local.metrics_on ? [true] : []
          content {
            status = "Enabled"
            event_threshold {
              minutes = 15
            }
          }
        }
      }
    }
  }

  depends_on = [aws_iam_role_policy.this]
}
