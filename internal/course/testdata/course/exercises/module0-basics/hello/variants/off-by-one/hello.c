int hello(int n){return n-1;}
