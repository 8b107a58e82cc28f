// placeholder: replaced by the suite's author
