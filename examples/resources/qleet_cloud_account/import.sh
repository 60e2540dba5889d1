# Import a cloud account by its ID, or by its name. Its secret access key and session token are
# write-only: they are not imported, and the first apply after the import writes them again.
terraform import qleet_cloud_account.prod prod
