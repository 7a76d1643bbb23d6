output "publisher_role_arn" {
  description = "ARN of the publisher role (trainer, and the relay in copy mode)."
  value       = aws_iam_role.this["publisher"].arn
}

output "worker_role_arn" {
  description = "ARN of the worker role; assume it with a session tag <worker_id_tag_key>=<worker id>."
  value       = aws_iam_role.this["worker"].arn
}

output "gc_role_arn" {
  description = "ARN of the garbage-collector role, the only one allowed to delete."
  value       = aws_iam_role.this["gc"].arn
}

output "worker_id_tag_key" {
  description = "Session tag key that carries the worker id."
  value       = var.worker_id_tag_key
}

output "publisher_policy_json" {
  description = "Rendered inline policy of the publisher role."
  value       = data.aws_iam_policy_document.publisher.json
}

output "worker_policy_json" {
  description = "Rendered inline policy of the worker role."
  value       = data.aws_iam_policy_document.worker.json
}

output "gc_policy_json" {
  description = "Rendered inline policy of the garbage-collector role."
  value       = data.aws_iam_policy_document.gc.json
}
