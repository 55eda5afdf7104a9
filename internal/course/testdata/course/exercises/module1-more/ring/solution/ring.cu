// done
