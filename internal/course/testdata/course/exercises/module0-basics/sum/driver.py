import sum
