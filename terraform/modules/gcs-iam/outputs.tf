output "publisher_service_account_email" {
  description = "Email of the publisher service account (trainer, and the relay in copy mode)."
  value       = google_service_account.this["publisher"].email
}

output "worker_service_account_email" {
  description = "Email of the shared worker service account."
  value       = google_service_account.this["worker"].email
}

output "gc_service_account_email" {
  description = "Email of the garbage-collector service account, the only one allowed to delete snapshots."
  value       = google_service_account.this["gc"].email
}

output "custom_role_ids" {
  description = "Full ids (projects/<project>/roles/<id>) of the reader, creator and deleter custom roles."
  value       = { for k, r in google_project_iam_custom_role.this : k => r.name }
}

output "bindings" {
  description = "The conditional bucket bindings: key -> bucket, principal, role, member, title, expression."
  value       = module.policy.bindings
}
