# Import a bucket by its ID, or by its name.
terraform import qleet_bucket.uploads uploads
