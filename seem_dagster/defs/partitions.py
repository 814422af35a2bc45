from dagster import DynamicPartitionsDefinition

# One partition per conversation: one user's memory.
conversations = DynamicPartitionsDefinition(name="conversations")
