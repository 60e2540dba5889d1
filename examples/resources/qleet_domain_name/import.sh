# Import a domain name by its ID, or by its name.
terraform import qleet_domain_name.example example
