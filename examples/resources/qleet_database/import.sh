# Import a database by its ID, or by its name.
terraform import qleet_database.main main
