output "role_data_actions" {
  description = "Data actions of each custom role: reader, writer, deleter."
  value       = local.role_data_actions
}

output "assignments" {
  description = "Role assignments keyed <region label>/<principal>/<role>/<principal key>: scope, principal, role (a key of role_data_actions), principal_id and the condition (version 2.0)."
  value       = merge(local.shared, local.pinned)
}
