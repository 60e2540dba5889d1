# Import a gateway by its ID, or by its name.
terraform import qleet_gateway.web 0190a3f2-4b7e-7c1a-9d2e-1f2a3b4c5d6e
terraform import qleet_gateway.web web
