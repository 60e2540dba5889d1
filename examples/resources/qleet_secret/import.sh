# Import a secret by its ID, or by its name. Its values are write-only: they are not imported, and the
# first apply after the import writes them from the configuration again.
terraform import qleet_secret.api api
