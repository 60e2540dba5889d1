# Import a support service by its ID, or by its name.
terraform import qleet_support_service.metrics metrics-prod
