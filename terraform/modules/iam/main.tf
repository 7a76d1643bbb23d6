# Three roles for one run prefix, in every regional bucket:
#   publisher  writes <prefix>/v/* and <prefix>/LATEST (multipart included), reads and lists the prefix
#   worker     reads and lists the prefix; writes only <prefix>/workers/<its worker_id>.json
#   gc         reads and lists the prefix, deletes <prefix>/v/*, aborts stale multipart uploads
# Only the gc role holds s3:DeleteObject. The relay of copy mode runs as the publisher.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  account_root = "arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:root"

  publisher_principals = length(var.publisher_trusted_principal_arns) > 0 ? var.publisher_trusted_principal_arns : [local.account_root]
  worker_principals    = length(var.worker_trusted_principal_arns) > 0 ? var.worker_trusted_principal_arns : [local.account_root]
  gc_principals        = length(var.gc_trusted_principal_arns) > 0 ? var.gc_trusted_principal_arns : [local.account_root]

  prefix_objects   = [for b in var.bucket_arns : "${b}/${var.prefix}/*"]
  version_objects  = [for b in var.bucket_arns : "${b}/${var.prefix}/v/*"]
  latest_objects   = [for b in var.bucket_arns : "${b}/${var.prefix}/LATEST"]
  publisher_writes = concat(local.version_objects, local.latest_objects)

  # "$${...}" is Terraform's escape for a literal "${...}": IAM, not Terraform,
  # substitutes the caller's session tag when it evaluates the request.
  worker_status_objects = [
    for b in var.bucket_arns : "${b}/${var.prefix}/workers/$${aws:PrincipalTag/${var.worker_id_tag_key}}.json"
  ]

  list_prefixes = [var.prefix, "${var.prefix}/*"]
}

# ---------------------------------------------------------------- trust

data "aws_iam_policy_document" "publisher_trust" {
  statement {
    sid     = "AssumePublisher"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "AWS"
      identifiers = local.publisher_principals
    }
  }
}

# A worker must tag its session with its id; the tag becomes
# aws:PrincipalTag/<worker_id_tag_key> inside the session, which names the one
# status object it may write. Tag values cannot hold IAM wildcards ('*', '?')
# or '$' (STS accepts only letters, digits, spaces and _.:/=+-@), and '/' is
# refused here, so the id names exactly one key directly under workers/.
data "aws_iam_policy_document" "worker_trust" {
  statement {
    sid     = "AssumeWorkerWithId"
    actions = ["sts:AssumeRole", "sts:TagSession"]

    principals {
      type        = "AWS"
      identifiers = local.worker_principals
    }

    condition {
      test     = "StringLike"
      variable = "aws:RequestTag/${var.worker_id_tag_key}"
      values   = ["?*"]
    }

    condition {
      test     = "StringNotLike"
      variable = "aws:RequestTag/${var.worker_id_tag_key}"
      values   = ["*/*"]
    }

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "aws:TagKeys"
      values   = [var.worker_id_tag_key]
    }
  }
}

data "aws_iam_policy_document" "gc_trust" {
  statement {
    sid     = "AssumeGarbageCollector"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "AWS"
      identifiers = local.gc_principals
    }
  }
}

# ---------------------------------------------------------------- shared read

# Statements every role needs: list the run prefix, read its objects, find the
# bucket's region, decrypt with the run's KMS keys.
data "aws_iam_policy_document" "read" {
  statement {
    sid       = "ListRunPrefix"
    actions   = ["s3:ListBucket"]
    resources = var.bucket_arns

    dynamic "condition" {
      for_each = var.list_bucket_scope == "prefix" ? [true] : []
      content {
        test     = "StringLike"
        variable = "s3:prefix"
        values   = local.list_prefixes
      }
    }
  }

  statement {
    sid       = "BucketLocation"
    actions   = ["s3:GetBucketLocation"]
    resources = var.bucket_arns
  }

  statement {
    sid       = "ReadRunObjects"
    actions   = ["s3:GetObject"]
    resources = local.prefix_objects
  }

  dynamic "statement" {
    for_each = length(var.kms_key_arns) > 0 ? [var.kms_key_arns] : []
    content {
      sid       = "DecryptRunObjects"
      actions   = ["kms:Decrypt"]
      resources = statement.value
    }
  }
}

# ---------------------------------------------------------------- publisher

data "aws_iam_policy_document" "publisher" {
  source_policy_documents = [data.aws_iam_policy_document.read.json]

  # PutObject also covers CreateMultipartUpload, UploadPart, UploadPartCopy
  # (with GetObject on the source) and CompleteMultipartUpload.
  statement {
    sid = "WriteVersionsAndLatest"
    actions = [
      "s3:PutObject",
      "s3:AbortMultipartUpload",
      "s3:ListMultipartUploadParts",
    ]
    resources = local.publisher_writes
  }

  dynamic "statement" {
    for_each = length(var.kms_key_arns) > 0 ? [var.kms_key_arns] : []
    content {
      sid       = "EncryptRunObjects"
      actions   = ["kms:GenerateDataKey"]
      resources = statement.value
    }
  }
}

# ---------------------------------------------------------------- worker

data "aws_iam_policy_document" "worker" {
  source_policy_documents = [data.aws_iam_policy_document.read.json]

  statement {
    sid       = "WriteOwnStatus"
    actions   = ["s3:PutObject"]
    resources = local.worker_status_objects
  }

  dynamic "statement" {
    for_each = length(var.kms_key_arns) > 0 ? [var.kms_key_arns] : []
    content {
      sid       = "EncryptOwnStatus"
      actions   = ["kms:GenerateDataKey"]
      resources = statement.value
    }
  }
}

# ---------------------------------------------------------------- garbage collector

data "aws_iam_policy_document" "gc" {
  source_policy_documents = [data.aws_iam_policy_document.read.json]

  statement {
    sid       = "DeleteOldVersions"
    actions   = ["s3:DeleteObject"]
    resources = local.version_objects
  }

  # ListBucketMultipartUploads has no s3:prefix condition key, so it is granted
  # on the bucket; the aborts themselves stay inside the run prefix.
  statement {
    sid       = "FindStaleUploads"
    actions   = ["s3:ListBucketMultipartUploads"]
    resources = var.bucket_arns
  }

  statement {
    sid       = "AbortStaleUploads"
    actions   = ["s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]
    resources = local.prefix_objects
  }
}

# ---------------------------------------------------------------- roles

locals {
  roles = {
    publisher = {
      description = "wanrl-s3 publisher: writes snapshot versions and LATEST under ${var.prefix}/"
      trust       = data.aws_iam_policy_document.publisher_trust.json
      policy      = data.aws_iam_policy_document.publisher.json
    }
    worker = {
      description = "wanrl-s3 worker: reads ${var.prefix}/, writes only its own status object"
      trust       = data.aws_iam_policy_document.worker_trust.json
      policy      = data.aws_iam_policy_document.worker.json
    }
    gc = {
      description = "wanrl-s3 garbage collector: the only role that deletes under ${var.prefix}/v/"
      trust       = data.aws_iam_policy_document.gc_trust.json
      policy      = data.aws_iam_policy_document.gc.json
    }
  }
}

resource "aws_iam_role" "this" {
  for_each = local.roles

  name                 = "${var.name_prefix}-${each.key}"
  description          = each.value.description
  assume_role_policy   = each.value.trust
  max_session_duration = var.max_session_duration_s
  permissions_boundary = var.permissions_boundary_arn
  tags                 = var.tags
}

resource "aws_iam_role_policy" "this" {
  for_each = local.roles

  name   = "${var.name_prefix}-${each.key}"
  role   = aws_iam_role.this[each.key].id
  policy = each.value.policy
}
