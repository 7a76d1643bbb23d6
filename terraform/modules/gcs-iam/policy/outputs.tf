output "role_permissions" {
  description = "Permissions of each custom role: reader, creator, deleter."
  value       = local.role_permissions
}

output "bindings" {
  description = "Bucket IAM bindings keyed <bucket>/<principal>/<role>/<member key>: bucket, principal, role (a key of role_permissions), member, title and the CEL condition expression."
  value       = merge(local.shared, local.pinned)
}
