output "regions_toml" {
  description = "The regions file the CLI reads: `terraform output -raw regions_toml > regions.toml`."
  value = templatefile("${path.module}/regions.toml.tftpl", {
    primary = var.regions.primary.label
    mode    = var.mode
    regions = local.toml_regions
  })
}

output "buckets" {
  description = "Per region label: bucket name, AWS region and s3:// URL of the run prefix."
  value = {
    for key, b in local.buckets : var.regions[key].label => {
      bucket    = b.bucket_id
      s3_region = b.region
      url       = b.url
    }
  }
}

output "publisher_role_arn" {
  description = "Role the trainer (and `wanrl-s3 relay`) assumes to publish."
  value       = module.iam.publisher_role_arn
}

output "worker_role_arn" {
  description = "Role rollout workers assume, with session tag worker_id=<their id>."
  value       = module.iam.worker_role_arn
}

output "gc_role_arn" {
  description = "Role the garbage collector assumes; the only one that may delete."
  value       = module.iam.gc_role_arn
}

output "worker_id_tag_key" {
  description = "Session tag key that carries a worker's id when it assumes the worker role."
  value       = module.iam.worker_id_tag_key
}

output "replication_role_arn" {
  description = "Role S3 uses to replicate from the primary, or null outside replicate mode."
  value       = one(module.replication[*].role_arn)
}
