// pipedream
