int hello(int n){return n;}
