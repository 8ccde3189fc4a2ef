output "task_definition_arn" {
  description = "The piped task definition (piped + wisp bridge)."
  value       = aws_ecs_task_definition.piped.arn
}

output "container_definitions" {
  description = "The task's container definitions, as JSON."
  value       = aws_ecs_task_definition.piped.container_definitions
}
