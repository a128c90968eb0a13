// table
