// cmd_predict
