# CloudFront in front of one private snapshot bucket. CloudFront reads the
# bucket with origin access control (SigV4 as the distribution itself); the
# bucket stays private and its policy, given bucket_policy_json (output), lets
# only this distribution read, and only the run's versions and LATEST. Every
# behaviour trusts one key group: a viewer needs a URL or cookies signed with
# a private key whose public half is in it (wanrl_s3.cdn.CloudFrontSigner).
#
# Caching is correct by construction:
#   <prefix>/v/*      manifests and payload, immutable once committed: cached
#                     for a year (the origin's Cache-Control wins inside
#                     [0, immutable_max_ttl_s]); a ranged GET is served from and
#                     stored in the cache without Range in the cache key;
#   <prefix>/LATEST   moved by compare-and-swap: never cached (TTL 0);
#   anything else     not cached, and the bucket policy gives CloudFront no
#                     read of it (worker status objects, other runs).
# Query strings, headers and cookies are left out of every cache key, so the
# signing parameters never split the cache and never reach the bucket.

locals {
  origin_id       = "snapshots"
  versions_path   = "/${var.prefix}/v/*"
  latest_path     = "/${var.prefix}/LATEST"
  readable_keys   = ["${var.bucket_arn}/${var.prefix}/v/*", "${var.bucket_arn}/${var.prefix}/LATEST"]
  custom_cert     = var.acm_certificate_arn != null
  key_group_items = [for key in aws_cloudfront_public_key.this : key.id]

  # Only <prefix>/v/* is cached; LATEST and everything else never are.
  cache_policies = {
    immutable = {
      comment     = "wanrl-s3 <prefix>/v/*: immutable manifests and payload"
      default_ttl = var.immutable_default_ttl_s
      max_ttl     = var.immutable_max_ttl_s
    }
    uncached = {
      comment     = "wanrl-s3 LATEST and everything else: never cached"
      default_ttl = 0
      max_ttl     = 0
    }
  }
  ordered_behaviours = [
    { path = local.versions_path, cache = "immutable" },
    { path = local.latest_path, cache = "uncached" },
  ]
}

resource "aws_cloudfront_origin_access_control" "this" {
  name                              = var.name
  description                       = "wanrl-s3 snapshots: CloudFront signs every request to the bucket"
  origin_access_control_origin_type = "s3"
  signing_behavior                  = "always"
  signing_protocol                  = "sigv4"
}

resource "aws_cloudfront_public_key" "this" {
  for_each = var.public_keys

  name        = "${var.name}-${each.key}"
  comment     = "wanrl-s3 CDN signing key ${each.key}"
  encoded_key = each.value
}

resource "aws_cloudfront_key_group" "this" {
  name    = var.name
  comment = "Keys whose private halves may sign wanrl-s3 snapshot URLs and cookies"
  items   = local.key_group_items
}

resource "aws_cloudfront_cache_policy" "this" {
  for_each = local.cache_policies

  name        = "${var.name}-${each.key}"
  comment     = each.value.comment
  min_ttl     = 0
  default_ttl = each.value.default_ttl
  max_ttl     = each.value.max_ttl

  parameters_in_cache_key_and_forwarded_to_origin {
    enable_accept_encoding_brotli = false
    enable_accept_encoding_gzip   = false

    cookies_config {
      cookie_behavior = "none"
    }
    headers_config {
      header_behavior = "none"
    }
    query_strings_config {
      query_string_behavior = "none"
    }
  }
}

resource "aws_cloudfront_response_headers_policy" "this" {
  name    = var.name
  comment = "Security headers on every wanrl-s3 snapshot response"

  security_headers_config {
    content_type_options {
      override = true
    }
    strict_transport_security {
      access_control_max_age_sec = 31536000
      include_subdomains         = true
      override                   = true
      preload                    = true
    }
  }
}

resource "aws_cloudfront_distribution" "this" {
  #checkov:skip=CKV_AWS_68:No WAF by default: every behaviour trusts a key group, so CloudFront refuses unsigned requests before any origin fetch; pass web_acl_id to add one.
  #checkov:skip=CKV2_AWS_47:No WAF by default (see CKV_AWS_68): signed URLs or cookies gate every request; pass web_acl_id to attach a web ACL with the Log4j rule set.
  #checkov:skip=CKV_AWS_86:Access logs need a separate log bucket that this module does not own; pass logging_bucket_domain_name to turn them on.
  #checkov:skip=CKV_AWS_310:One origin on purpose: a failover origin would be another bucket of the same run, which the regions file and the reader's own failover already cover.
  #checkov:skip=CKV_AWS_374:Rollout workers run in any country; signed URLs and cookies, not geography, decide who may read.
  #checkov:skip=CKV_AWS_305:No default root object: the distribution serves snapshot keys only, and the root path is refused without a signature anyway.
  #checkov:skip=CKV_AWS_174:With the default *.cloudfront.net certificate CloudFront fixes the TLS policy itself; with acm_certificate_arn the module sets TLSv1.2_2021.
  #checkov:skip=CKV2_AWS_42:A custom certificate needs a domain the module does not own; pass acm_certificate_arn and aliases to use one.
  enabled         = true
  is_ipv6_enabled = true
  http_version    = "http2and3"
  comment         = "wanrl-s3 snapshots of ${var.prefix}"
  price_class     = var.price_class
  aliases         = var.aliases
  web_acl_id      = var.web_acl_id
  tags            = var.tags

  origin {
    origin_id                = local.origin_id
    domain_name              = var.bucket_regional_domain_name
    origin_access_control_id = aws_cloudfront_origin_access_control.this.id
  }

  dynamic "ordered_cache_behavior" {
    for_each = local.ordered_behaviours
    content {
      path_pattern               = ordered_cache_behavior.value.path
      target_origin_id           = local.origin_id
      allowed_methods            = ["GET", "HEAD"]
      cached_methods             = ["GET", "HEAD"]
      viewer_protocol_policy     = "https-only"
      compress                   = false
      cache_policy_id            = aws_cloudfront_cache_policy.this[ordered_cache_behavior.value.cache].id
      response_headers_policy_id = aws_cloudfront_response_headers_policy.this.id
      trusted_key_groups         = [aws_cloudfront_key_group.this.id]
    }
  }

  default_cache_behavior {
    target_origin_id           = local.origin_id
    allowed_methods            = ["GET", "HEAD"]
    cached_methods             = ["GET", "HEAD"]
    viewer_protocol_policy     = "https-only"
    compress                   = false
    cache_policy_id            = aws_cloudfront_cache_policy.this["uncached"].id
    response_headers_policy_id = aws_cloudfront_response_headers_policy.this.id
    trusted_key_groups         = [aws_cloudfront_key_group.this.id]
  }

  dynamic "logging_config" {
    for_each = var.logging_bucket_domain_name == null ? [] : [var.logging_bucket_domain_name]
    content {
      bucket          = logging_config.value
      include_cookies = false
      prefix          = "cloudfront/${var.name}/"
    }
  }

  restrictions {
    geo_restriction {
      restriction_type = "none"
    }
  }

  viewer_certificate {
    cloudfront_default_certificate = !local.custom_cert
    acm_certificate_arn            = var.acm_certificate_arn
    ssl_support_method             = local.custom_cert ? "sni-only" : null
    minimum_protocol_version       = local.custom_cert ? "TLSv1.2_2021" : "TLSv1"
  }
}

# The statement the bucket's policy needs: only this distribution, through
# origin access control, may read, and only the run's versions and LATEST.
# Pass bucket_policy_json to modules/snapshot-bucket's source_policy_documents
# (a bucket has one policy; this module never writes it).
data "aws_iam_policy_document" "bucket" {
  statement {
    sid       = "CloudFrontReadsRunVersionsAndLatest"
    effect    = "Allow"
    actions   = ["s3:GetObject"]
    resources = local.readable_keys

    principals {
      type        = "Service"
      identifiers = ["cloudfront.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "AWS:SourceArn"
      values   = [aws_cloudfront_distribution.this.arn]
    }
  }
}
